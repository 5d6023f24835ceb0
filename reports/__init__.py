"""Results and cost: tables, goodput, Pareto, cost per million tokens, comparisons; the cost and
the teardown audit in accounting/."""
