"""The Nonlinearity Budget: shared code for the book's chapters.

One module per idea of the papers (`symbolic`, `bilinear`, ...) plus a few shared ones
(`profiles`, `models`, `corpora`, `results`, `plots`, `runner`, `book`).
"""

__version__ = "0.1.0"
