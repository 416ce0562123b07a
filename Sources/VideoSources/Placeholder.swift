import MediaTypes
