"""`pkb report`: a batch's results from the SQLite store, with screening quality against hardware."""
