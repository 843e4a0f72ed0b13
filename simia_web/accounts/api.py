"""`me`: check a token and its role."""

from rest_framework import serializers
from rest_framework.generics import RetrieveAPIView

from .models import User


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
