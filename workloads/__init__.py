"""Load and runs: AIPerf workload definitions, seeded datasets, targets and the runner."""
