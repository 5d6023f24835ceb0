"""Results and cost: tables, goodput, Pareto, cost per million tokens, comparisons, audit."""
