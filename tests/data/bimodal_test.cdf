# TEST DISTRIBUTION of hpccd's tests: made up for them, NOT a published workload
# (neither WebSearch nor FB_Hadoop; docs/experiments.md "fct" says where those are).
# Bimodal: 70% of the flows between 1 KB and 8 KB, 30% between 100 KB and 400 KB;
# mean 69 950 bytes (0.5 x 2500 + 0.2 x 6000 + 0.15 x 150000 + 0.15 x 300000).
#
# size_bytes  cumulative_percent
1000      0
4000     50
8000     70
100000   70
200000   85
400000  100
