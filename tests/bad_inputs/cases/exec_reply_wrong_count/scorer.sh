#!/bin/sh
read line; echo "{\"rewards\": [1]}"
