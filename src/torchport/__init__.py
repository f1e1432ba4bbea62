"""torchport: evidence for moving a PyTorch app to another accelerator."""
from torchport.app import App

__version__ = "0.1.0"
__all__ = ["App", "__version__"]
