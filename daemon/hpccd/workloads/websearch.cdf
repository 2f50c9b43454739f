# Flow-size CDF of a web-search cluster (query/response and background traffic).
# Measured by Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010; used as the WebSearch
# workload by the HPCC paper (Li et al.,
# "HPCC: High Precision Congestion Control", SIGCOMM 2019, section 5.1) at 30% and 50% load.
# Points as published with the HPCC authors' traffic generator
# (github.com/alibaba-edu/High-Precision-Congestion-Control, traffic_gen/WebSearch_distribution.txt).
# Columns: flow size in bytes, cumulative percent of flows no larger than that size.
# 
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
