"""(being written)"""
__all__ = []
TECHNIQUES = ()
