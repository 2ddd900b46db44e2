"""The training container's code: ``train.py`` is the entrypoint; ``input``, ``model`` and ``run`` are its parts."""
