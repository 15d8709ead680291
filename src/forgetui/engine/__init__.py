"""forgetui.engine"""
