"""The PyTorch training container's code (the room beside ``training_entry``, TensorFlow's):
``train.py`` is the entrypoint; ``examples`` reads the processing step's TFRecord shards without
TensorFlow; ``networks`` builds the models; ``strategies`` holds one module per way of spreading
the work (``ddp``). The record layout and the hyperparameter names are ``training_entry``'s
standard-library contract modules (``contract``, ``input.records``); nothing here imports
TensorFlow or Horovod, and nothing in ``training_entry`` imports torch (import-linter)."""
