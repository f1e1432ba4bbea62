"""Another name for ``torchport.formatting``, for code that imports the
renderers' formatting from here; torchport's own modules import it from there,
below the stage packages that render with it."""
from torchport.formatting import *  # noqa: F401,F403
