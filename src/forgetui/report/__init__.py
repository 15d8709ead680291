"""forgetui.report"""
