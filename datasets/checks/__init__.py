"""Checks of converted data, beside the readers and writers (they import neither).

`verify_records`, the verifier's work (`python -m datasets.verify_records`): every record of
every shard read and parsed, its frames decoded; `index_check`: format 2's indexes
against their shards, and a split's index entries counted against dataset_info.json
before training or evaluation builds a graph.
"""
