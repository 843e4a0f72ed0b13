from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "simia_web.calibration"
    label = "calibration"
    verbose_name = "Judge calibration on human ratings"
