#!/bin/sh
read line; echo "{\"rewards\": [\"high\", 1]}"
