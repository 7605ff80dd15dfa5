"""RocketMQ's remoting protocol (RemotingCommand over TCP): codec, header classes, the listener."""
