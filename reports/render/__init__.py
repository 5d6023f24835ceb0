"""What a reader sees: report.md (markdown, the columns each table shows: md_columns, the summary
it opens with: summary, the first screen that answers: first_screen), index.html rendered from
it (html), the PNG plots (plots, trace_plot) with labels that overlap nothing (plot_labels), and
a campaign's forecast against what it measured (campaign), and the explore's answer beside
the runs (explore_section: `stacks explore`'s files and its top candidates per SLO).

Render imports records, tables and comparisons (it writes what they computed and decides
nothing); only the pipeline and CLI at reports/ top level (build, __main__) import it.
"""
