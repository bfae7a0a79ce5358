"""Latency prediction (li2023): per-op measurement campaigns, op datasets, predictors and calibration.

- :mod:`edgeplan.measure.op_campaign`: resumable campaigns that measure models per op and end to end in a
  scenario (:mod:`edgeplan.measure.scenarios`), and the export of a campaign to a shipped dataset.
"""
