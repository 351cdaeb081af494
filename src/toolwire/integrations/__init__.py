"""toolwire inside other serving stacks (`toolwire.integrations.vllm`: vLLM's parser plugin)."""
