"""Domain applications: distributed patterns from scientific ML, recommendation, vision, graph learning and retrieval."""
