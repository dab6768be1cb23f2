"""Verdicts: the claims engine (`claims`: the ledger's vocabulary and the rules' building
blocks), the statistics the rules use (`stats`: intervals, bootstraps) and the results files the
chapters write and the ledger reads (`results`)."""
