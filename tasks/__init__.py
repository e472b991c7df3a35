"""The benchmark suite: the Task API and one module per task. Not built yet: see issue 5."""
