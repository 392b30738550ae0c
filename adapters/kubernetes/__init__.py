"""The cluster seams on the official ``kubernetes`` client."""
