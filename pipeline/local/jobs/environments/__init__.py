"""The Python a job runs under: the interpreter its image stands for and the environment its requirements install."""
