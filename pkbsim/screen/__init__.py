"""`pkb screen`: judge a candidate without a GPU, in stages (static, functional, cost), stopping at the
first stage that rejects it. `screen()` in pipeline.py is the entry point."""
