"""trainpipe's pipeline side: builds the SageMaker definition, runs it locally or in the cloud.

Importing this package quiets the SageMaker SDK before it is imported anywhere: the SDK
otherwise prints config-file lookups and deprecation notices to stdout, which belongs to the
definition JSON that ``trainpipe definition`` prints.
"""

import logging as _logging
import os as _os

_os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
for _name in ("sagemaker", "sagemaker.config"):
    _logger = _logging.getLogger(_name)
    _logger.setLevel(_logging.ERROR)
    # A handler on "sagemaker" stops the SDK from adding its own stdout handler.
    if not _logger.handlers:
        _logger.addHandler(_logging.NullHandler())
