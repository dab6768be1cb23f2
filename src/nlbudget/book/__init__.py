"""The book's build, in the order it runs: `profiles` (each chapter's settings per scale, and
their validation), `plan` (what is stale and in what order), `runner` (papermill), `build`
(stage and render with Jupyter Book), `exercises` (the exercise notebooks), `launch` (launch
buttons); and what a page shows besides the experiment: `plots`, `pages`."""
