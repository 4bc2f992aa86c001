"""Digitisation: a scanned log's pixels to calibrated curves and result files.

Inference (`predict`), reading a scan at its model's pixel scale (`rescale`), candidate runs and the
column tracer (`runs`, `tracer`), calibration (`calibration`), curves on a regular depth step
(`curves`), the result files (`export`) and the one path from a scan to them (`pipeline`). Import
from the defining module; this package re-exports nothing.
"""
