"""Runnable customer-service bots built on the harness: local mic/speaker, Daily, Twilio, Pipecat runner."""
