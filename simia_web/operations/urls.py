from django.urls import path

from . import views

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("webhooks/", views.webhook_list, name="webhook-list"),
    path("webhooks/<int:pk>/", views.webhook_detail, name="webhook-detail"),
    path("webhooks/<int:pk>/deliveries/", views.webhook_deliveries, name="webhook-deliveries"),
    path("webhooks/<int:pk>/test/", views.webhook_test, name="webhook-test"),
    path("webhooks/<int:pk>/delete/", views.webhook_delete, name="webhook-delete"),
    path("webhooks/<int:pk>/rotate-secret/", views.webhook_secret_rotate, name="webhook-secret-rotate"),
    path("webhooks/deliveries/<int:pk>/retry/", views.webhook_delivery_retry, name="webhook-delivery-retry"),
]
