"""The error every data loader raises when it finds no copy of its data set."""


class DataNotFoundError(FileNotFoundError):
    """No copy of a data set was found where it was looked for, and none could be downloaded;
    the message lists every path tried and the variable (``I2O_DATA_DIR``) that sets the first."""
