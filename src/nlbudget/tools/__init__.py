"""Commands that apply the book's methods to a reader's own model (`nlbudget budget`)."""
