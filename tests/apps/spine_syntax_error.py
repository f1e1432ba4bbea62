import torch


def app()
    return None
