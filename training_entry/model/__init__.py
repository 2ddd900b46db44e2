"""What is trained: the networks, the user's model, transfer learning, initial weights and the serving export."""
