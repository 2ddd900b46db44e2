"""The pipeline definition: its parameters, its steps, the code bundles they ship, and ``get_pipeline()`` (``build.py``) that wires them."""
