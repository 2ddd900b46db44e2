"""What a rank reads: TFRecord shards and Pipe FIFOs, planned per rank and turned into tf.data datasets."""
