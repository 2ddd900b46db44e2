"""Cost and carbon of every run: prices.py (Price List API, dated table, overrides),
carbon.py (energy and CO2e factors with their sources), hardware.py (instance make-up and
region locations), accounting.py (per job and per execution), cloud.py (a SageMaker
execution's jobs)."""
