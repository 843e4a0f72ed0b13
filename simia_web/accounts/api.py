"""API-wide pieces: the error body every endpoint answers with, and `me` (check a token and its role)."""

from rest_framework import serializers
from rest_framework.generics import RetrieveAPIView

from .models import User


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class MeSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "username", "email", "role"]


class MeApi(RetrieveAPIView):
    serializer_class = MeSerializer
    pagination_class = None
    filter_backends = []

    def get_object(self):
        return self.request.user
