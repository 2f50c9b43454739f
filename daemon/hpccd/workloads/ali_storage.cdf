# Flow-size CDF of Alibaba's production distributed storage system, collected in 2019.
# Published by the HPCC authors with their traffic generator
# (github.com/alibaba-edu/High-Precision-Congestion-Control, traffic_gen/AliStorage2019.txt).
# Columns: flow size in bytes, cumulative percent of flows no larger than that size.
# 
0 0
4000 22.93
8000 69.21
16000 80.61
32000 90.47
64000 93.53
128000 96.77
256000 97.53
2000000 100
