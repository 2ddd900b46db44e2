"""The scaling advisor: from recorded runs, how long, how much and how much CO2e a training
run takes on 1..N workers, where the knee is, and which layout fits a goal.

model.py (the explicit step-time model), observations.py (runs read from execution.json and
SageMaker), fit.py (calibration, learning, error), knee.py, recommend.py, plot.py, advise.py
(end to end; ``trainpipe advise`` in pipeline/cli/advise.py).
"""
