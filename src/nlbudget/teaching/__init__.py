"""Teaching: the checks the exercise notebooks call (`checks`)."""
