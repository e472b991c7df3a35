"""Machine descriptions as data files, one per machine. Not written yet: see issue 4."""
