"""forgetui.store"""
