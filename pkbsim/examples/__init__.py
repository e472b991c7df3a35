"""Programs bundled with pkb: the default job of `pkb check --demo`."""
