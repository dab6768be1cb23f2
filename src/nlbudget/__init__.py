"""The Nonlinearity Budget: shared code for the book's chapters.

One module per idea of the papers (`symbolic`, `bilinear`, ...) plus a few shared ones
(`profiles`, `models`, `corpora`, `results`, `plots`, `runner`, `book`).
"""

__version__ = "0.1.0"

import warnings as _warnings

# tqdm.auto in a kernel without ipywidgets warns on import (through transformers); the
# chapters' progress bars fall back to text, which is what the book wants.
_warnings.filterwarnings("ignore", message="IProgress not found")
