"""Step names: the one definition (``pipeline.definition.build`` re-exports them)."""

from __future__ import annotations

STEP_PREPROCESS = "PreprocessData"
STEP_TRAIN = "TrainModel"
STEP_EVALUATE = "EvaluateModel"
STEP_CONDITION = "CheckAccuracy"
STEP_REGISTER = "RegisterModel"  # ModelStep: the definition names it "RegisterModel-RegisterModel"
STEP_FAIL = "AccuracyTooLow"
STEP_ORDER = (STEP_PREPROCESS, STEP_TRAIN, STEP_EVALUATE, STEP_CONDITION, STEP_REGISTER, STEP_FAIL)
