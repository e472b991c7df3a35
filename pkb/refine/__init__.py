"""`pkb refine`: the generate-screen-fix loop (client, extract, feedback, screening, store, loop, plan, kernelgen)."""
