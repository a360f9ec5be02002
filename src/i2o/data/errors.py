"""The errors the data loaders raise: no copy found, or a copy that is not the data set."""


class DataNotFoundError(FileNotFoundError):
    """No copy of a data set was found where it was looked for, and none could be downloaded;
    the message lists every path tried and the variable (``I2O_DATA_DIR``) that sets the first."""


class DataCorruptError(ValueError):
    """A copy of a data set whose files are missing, truncated or altered (they do not match the
    published checksums); the message names each bad file and says how to repair the copy."""
