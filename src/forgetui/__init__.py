"""forgetui: which of my models should do which job?"""

__version__ = "0.1.0"
